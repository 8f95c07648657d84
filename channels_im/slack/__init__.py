"""Slack provider: Block Kit approval cards and signed ``block_actions`` callbacks.

- :mod:`channels_im.slack.transport` — :class:`SlackChannel` (Web API calls), kind ``slack``;
- :mod:`channels_im.slack.config` — configuration validation and message references;
- :mod:`channels_im.slack.inbound` — request signature check and click parsing;
- :mod:`channels_im.slack.blocks` — Block Kit built from :class:`channels_im.cards.CardFacts`.
"""
