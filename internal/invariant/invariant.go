// Package invariant asserts what must always hold in core code. A broken
// invariant panics: the actor stops before it corrupts data.
package invariant

import "fmt"

// Violation is the panic value of a broken invariant.
type Violation struct{ Msg string }

func (v *Violation) Error() string { return "invariant violated: " + v.Msg }

// Check panics with a *Violation if cond is false.
func Check(cond bool, format string, args ...any) {
	if !cond {
		panic(&Violation{Msg: fmt.Sprintf(format, args...)})
	}
}
