"""Decision rules as data: a rule's spec (its primary, bar, guards, looks and levels, hashed) and the registry of every
rule a plan may name. Below the decision procedures (fairwin/decision/), so that loading a plan, which names its
rule, never imports the numpy and scipy that deciding needs."""
