package gateway_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nanofleet/nanofleet/services/channel-gateway/gateway"
)

// TestConfigValidate: every invalid field is named, not the first only.
func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*gateway.Config)
		fields []string // named; none: valid
	}{
		{"defaults", func(*gateway.Config) {}, nil},
		{"no delivery", func(c *gateway.Config) { c.MaxDeliver = 0 }, []string{"MaxDeliver"}},
		{"backoff upside down", func(c *gateway.Config) { c.MinBackoff, c.MaxBackoff = time.Minute, time.Second }, []string{"MinBackoff"}},
		{"content over the bound", func(c *gateway.Config) { c.MaxContentBytes = gateway.MaxContentBytes + 1 }, []string{"MaxContentBytes"}},
		{"three at once", func(c *gateway.Config) { c.AckWait, c.Parallel, c.AttemptTimeout = 0, 0, 0 }, []string{"AckWait", "Parallel", "AttemptTimeout"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := gateway.DefaultConfig()
			tt.change(&c)
			err := c.Validate()
			if (err == nil) != (len(tt.fields) == 0) {
				t.Fatalf("Validate = %v, want %v named", err, tt.fields)
			}
			for _, f := range tt.fields {
				if !strings.Contains(err.Error(), f) {
					t.Errorf("Validate = %v, want it naming %s", err, f)
				}
			}
		})
	}
}
