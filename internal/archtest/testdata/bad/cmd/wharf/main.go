package main

import (
	"os"

	"github.com/nats-io/nats.go"
	"github.com/wharfmq/wharf/cmd/wharf/brokerconf"
	"github.com/wharfmq/wharf/sim"
)

func main() { go sim.Run(); _, _, _ = os.Exit, nats.Connect, brokerconf.Load }
