"""channels_im app."""
