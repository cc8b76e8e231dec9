package main

import "github.com/wharfmq/wharf/cmd/wharf"

func main() { go wharf.Main() }
