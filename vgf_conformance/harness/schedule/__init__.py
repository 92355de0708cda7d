"""Which cases a run or shard runs, batched and ordered by their recorded durations, and the quick tier chosen by coverage."""
