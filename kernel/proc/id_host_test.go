package proc

import "testing"

func TestIDHost(t *testing.T) {
	for id, want := range map[string]string{
		"p3@b": "b", "p12@build-2.example": "build-2.example", "p0@a": "a",
		"p3": "", "p3@": "", "@b": "", "p@b": "", "q3@b": "", "px@b": "", "p-1@b": "", "": "",
	} {
		got, ok := IDHost(id)
		if got != want || ok != (want != "") {
			t.Errorf("IDHost(%q) = %q, %v; want %q, %v", id, got, ok, want, want != "")
		}
	}
}
