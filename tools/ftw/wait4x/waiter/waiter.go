// Package waiter polls checkers until all are ready or a timeout passes.
package waiter

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"wait4x.dev/v3/checker"
)

type options struct {
	timeout  time.Duration
	interval time.Duration
	logger   logr.Logger
}

type Option func(*options)

func WithTimeout(d time.Duration) Option  { return func(o *options) { o.timeout = d } }
func WithInterval(d time.Duration) Option { return func(o *options) { o.interval = d } }
func WithLogger(l logr.Logger) Option     { return func(o *options) { o.logger = l } }

// WaitContext polls one checker every interval until it is ready.
func WaitContext(ctx context.Context, c checker.Checker, opts ...Option) error {
	o := options{timeout: 10 * time.Second, interval: time.Second, logger: logr.Discard()}
	for _, f := range opts {
		f(&o)
	}
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	id, _ := c.Identity()
	for {
		err := c.Check(ctx)
		if err == nil {
			return nil
		}
		o.logger.Info("waiting", "target", id, "reason", err.Error())
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w", id, err)
		case <-time.After(o.interval):
		}
	}
}

// WaitParallelContext waits for every checker at once.
func WaitParallelContext(ctx context.Context, cs []checker.Checker, opts ...Option) error {
	var wg sync.WaitGroup
	errs := make([]error, len(cs))
	for i, c := range cs {
		wg.Add(1)
		go func(i int, c checker.Checker) {
			defer wg.Done()
			errs[i] = WaitContext(ctx, c, opts...)
		}(i, c)
	}
	wg.Wait()
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
