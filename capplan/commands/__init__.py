"""One module per `capplan` command; each defines `register(app)`."""
