"""What Temporal sees of settled: workflow ids and task queues (`identity`), search attributes
(`visibility`) and the payload codec (`codec`)."""
