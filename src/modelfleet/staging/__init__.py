"""ModelCache staging decisions for the ModelCache workflow, as pure functions: which clusters a
cache goes to, what to do next on each given what was observed there, and how the whole reads.
No I/O, no clock (the time is an argument), no Temporal; the workflow carries the steps out."""
