package skipped

import "github.com/wharfmq/wharf/cmd/wharf"

func f() { go wharf.Main() }
