"""The fast limit search (`capplan limit --method fast`): characterise the server in closed
loop, predict the limit with a model of it, confirm on a few open-loop levels and correct
the model by its bias measured on the same requests. planner.limit.fast.search holds the
algorithm; model, misses, characterise and stats its parts; live and result the endpoint
and limit.json."""
