"""The WeCom (企业微信) provider: template-card app messages and verified ``template_card_event``
callbacks (docs/design.md §6; wire details in ``docs/protocols.md``).

- :mod:`channels_im.wecom.transport` — :class:`WecomChannel`, registered as kind ``wecom``;
- :mod:`channels_im.wecom.config` — configuration validation;
- :mod:`channels_im.wecom.client` — the server API: access token and calls;
- :mod:`channels_im.wecom.inbound` — callback verification and parsing;
- :mod:`channels_im.wecom.crypto` — msg_signature and AES-256-CBC with the EncodingAESKey;
- :mod:`channels_im.wecom.cards` — template cards built from :class:`channels_im.cards.CardFacts`.
"""
