
none