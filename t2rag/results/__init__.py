"""Everything made of a run's records: reading them (`records`), the one place they become numbers (`numbers`,
`outcomes`, `significance`), and what is made of those numbers (`report`, `findings`, `compare`, `export`,
`scoring`, `plots`, `tables`, the `explore` page). The command line, the explorer and the Ray reduce read the same
functions. docs/architecture.md draws where this half meets the run's."""
