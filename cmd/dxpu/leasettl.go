package main

import (
	"errors"
	"strconv"
	"time"

	"github.com/dxpu/dxpu/internal/app/units"
)

// leaseTTL is the manager's --lease-ttl: a duration, as every duration
// flag, in whole seconds, as etcd counts a lease. A bare number is its
// old spelling, seconds, still taken.
type leaseTTL struct{ secs *int }

func (v leaseTTL) String() string { return units.Duration(time.Duration(*v.secs) * time.Second) }

func (v leaseTTL) Type() string { return "duration" }

func (v leaseTTL) Set(s string) error {
	if n, err := strconv.Atoi(s); err == nil && n > 0 {
		*v.secs = n // the old spelling: seconds
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Second || d%time.Second != 0 || d > maxLeaseTTL {
		return errors.New("want whole seconds from 1s up to 1h (an etcd lease counts seconds), like 3s")
	}
	*v.secs = int(d / time.Second)
	return nil
}

// maxLeaseTTL bounds --lease-ttl: a dead leader is waited for that long.
const maxLeaseTTL = time.Hour
