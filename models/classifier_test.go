package models

import "testing"

// TestNewClassifierNilPanics: a nil network is refused at once, naming the
// function, not at the model's first use with a nil dereference.
func TestNewClassifierNilPanics(t *testing.T) {
	defer func() {
		if r := recover(); r != "models.NewClassifier: nil network" {
			t.Errorf("panic %v, want %q", r, "models.NewClassifier: nil network")
		}
	}()
	NewClassifier(nil)
}
