package invariant

import (
	"errors"
	"fmt"
	"path"
	"runtime"
	"strconv"
)

// Violation is the panic value of a failed check.
type Violation struct {
	Msg    string // the formatted message of the check
	Caller string // file:line of the failed check, for the fatal log
}

// Error makes a Violation an error, so that logs and supervisors that print
// errors print it whole.
func (v *Violation) Error() string {
	return "invariant violated at " + v.Caller + ": " + v.Msg
}

// Check panics with a *Violation carrying msg unless cond holds. msg should
// be a constant.
func Check(cond bool, msg string) {
	if !cond {
		fail(msg)
	}
}

// Check1 is Check with a message formatted from format and a, only on
// failure.
func Check1[A any](cond bool, format string, a A) {
	if !cond {
		fail1(format, a)
	}
}

// Check2 is Check1 with two arguments.
func Check2[A, B any](cond bool, format string, a A, b B) {
	if !cond {
		fail2(format, a, b)
	}
}

// Check3 is Check1 with three arguments.
func Check3[A, B, C any](cond bool, format string, a A, b B, c C) {
	if !cond {
		fail3(format, a, b, c)
	}
}

// Unreachable panics with a *Violation: control reached a place the code's
// model says it cannot. It is only called on the failing path, so its
// arguments may be boxed freely.
func Unreachable(format string, args ...any) {
	panic(violation(2, fmt.Sprintf(format, args...)))
}

// The fail functions are kept out of line so that the checks stay small
// enough to inline: the passing path is one compare and one branch.

//go:noinline
func fail(msg string) { panic(violation(3, msg)) }

//go:noinline
func fail1[A any](format string, a A) { panic(violation(3, fmt.Sprintf(format, a))) }

//go:noinline
func fail2[A, B any](format string, a A, b B) { panic(violation(3, fmt.Sprintf(format, a, b))) }

//go:noinline
func fail3[A, B, C any](format string, a A, b B, c C) {
	panic(violation(3, fmt.Sprintf(format, a, b, c)))
}

// violation builds the panic value; skip counts the frames between
// violation and the failed check's caller.
func violation(skip int, msg string) *Violation {
	v := &Violation{Msg: msg, Caller: "unknown"}
	if _, file, line, ok := runtime.Caller(skip); ok {
		v.Caller = path.Base(file) + ":" + strconv.Itoa(line)
	}
	return v
}

// Caught runs fn and returns the violation it panicked with (nil if fn
// returned). Any other panic goes on. It is for tests of the checks a
// core makes: each package's test asks for the message it expects.
func Caught(fn func()) (v *Violation) {
	defer func() {
		if p := recover(); p != nil {
			err, _ := p.(error)
			if !errors.As(err, &v) {
				panic(p)
			}
		}
	}()
	fn()
	return nil
}
