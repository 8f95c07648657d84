"""Slack provider: Block Kit approval cards and signed ``block_actions`` callbacks."""
