//go:build tools

package tools

import (
	_ "github.com/coreruleset/albedo"
	_ "github.com/coreruleset/go-ftw/v2"
)
