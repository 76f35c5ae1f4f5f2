package adaptertest

import (
	"strings"
	"testing"
)

// Change is a change to a valid config, and the key whose whole path the
// error of Validate must then name ("" when the config stays valid).
type Change[C any] struct {
	Name string
	Edit func(*C)
	Key  string
}

// Validate checks each change to ok, a valid config, as a subtest.
func Validate[C interface{ Validate() error }](t *testing.T, ok C, changes []Change[C]) {
	for _, ch := range changes {
		t.Run(ch.Name, func(t *testing.T) {
			c := ok
			ch.Edit(&c)
			err := c.Validate()
			if (err == nil) != (ch.Key == "") || (err != nil && !strings.Contains(err.Error(), ch.Key)) {
				t.Errorf("Validate() = %v, want an error naming %q", err, ch.Key)
			}
		})
	}
}
