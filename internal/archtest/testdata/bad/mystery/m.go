package mystery // want imports: no import rule for folder mystery/

import "fmt"

var _ = fmt.Sprint
