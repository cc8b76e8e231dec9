module github.com/wharfmq/wharf/bench
