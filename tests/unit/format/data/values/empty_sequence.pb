
	empty_seq