"""The Feishu / Lark provider: approval cards through the official ``lark-oapi`` SDK, verified
``card.action.trigger`` callbacks (docs/design.md §6; wire details in ``docs/protocols.md``).

- :mod:`channels_im.feishu.transport` — :class:`FeishuChannel`, registered as kind ``feishu``;
- :mod:`channels_im.feishu.config` — configuration validation;
- :mod:`channels_im.feishu.client` — the SDK client and how its failures become delivery errors;
- :mod:`channels_im.feishu.inbound` — callback verification and parsing;
- :mod:`channels_im.feishu.crypto` — callback signature check and AES-256-CBC decryption;
- :mod:`channels_im.feishu.cards` — card JSON 2.0 built from :class:`channels_im.cards.CardFacts`.
"""
