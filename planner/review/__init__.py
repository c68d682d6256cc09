"""The quarterly capacity review: many services in one baseline (review file -> review.json)."""
