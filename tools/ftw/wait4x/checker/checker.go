// Package checker is the part of wait4x's API that go-ftw uses: something
// that can tell whether a service is ready.
package checker

import "context"

// Checker reports whether its target is ready: nil when it is.
type Checker interface {
	Identity() (string, error)
	Check(ctx context.Context) error
}
