"""Load generation only: the locustfile, OpenAI streaming user, arrivals, stages, recorder."""
