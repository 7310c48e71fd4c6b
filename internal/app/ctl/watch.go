package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/dxpu/dxpu/fabric/ctlclient"
	"github.com/dxpu/dxpu/fabric/table"
)

// Table prints the switch forwarding table.
func Table(ctx context.Context, o Options) error {
	return call(ctx, o, func(ctx context.Context, c *ctlclient.Client) (table.Table, error) { return c.Table(ctx) }, printTable)
}

// WatchTable follows the table as a switch does: long-polls with the
// version it has and prints every new version, until ctx ends (then it
// returns nil); o.Timeout does not apply.
func WatchTable(ctx context.Context, o Options) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	var version uint64
	for first := true; ctx.Err() == nil; first = false {
		t, err := c.WatchTable(ctx, version, 30*time.Second)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return classify(err)
		}
		if !first && t.Version == version {
			continue
		}
		version = t.Version
		if o.JSON {
			json.NewEncoder(o.Stdout).Encode(t)
			continue
		}
		tw := tabwriter.NewWriter(o.Stdout, 0, 4, 2, ' ', 0)
		printTable(tw, t)
		fmt.Fprintln(tw)
		tw.Flush()
	}
	return nil
}

// Events prints the pool's events, only host's when set. With watch it
// keeps printing new ones until ctx ends (then it returns nil) and
// o.Timeout does not apply.
func Events(ctx context.Context, o Options, host string, watch bool) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	if !watch {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	var since uint64
	for {
		wait := time.Duration(0)
		if watch {
			wait = 30 * time.Second
		}
		evs, next, err := c.Events(ctx, since, host, wait)
		if err != nil {
			if watch && ctx.Err() != nil {
				return nil
			}
			return classify(err)
		}
		tw := tabwriter.NewWriter(o.Stdout, 0, 4, 2, ' ', 0)
		for _, e := range evs {
			if o.JSON {
				json.NewEncoder(o.Stdout).Encode(e)
			} else {
				printEvent(tw, e)
			}
		}
		tw.Flush()
		since = next
		if !watch {
			return nil
		}
	}
}
