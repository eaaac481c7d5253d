"""Who may run what: the policy table, principals and the one gate every door asks. Pure: no I/O."""
