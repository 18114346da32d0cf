package pgjc

import "testing"

func TestDSN(t *testing.T) {
	for in, want := range map[string]string{
		"postgresql://u@localhost:5432/d?hostaddr=127.0.0.1&keepalives_idle=5":          "postgresql://u@127.0.0.1:5432/d",
		"postgresql://u@h1:5432,h2:5433/d?keepalives=1&target_session_attrs=read-write": "postgresql://u@h1:5432,h2:5433/d?target_session_attrs=read-write",
		"postgresql://u@h/d": "postgresql://u@h/d",
	} {
		if got, _ := DSN(in); got != want {
			t.Errorf("DSN(%q) = %q, want %q", in, got, want)
		}
	}
	if _, ka := DSN("postgresql://u@h/d?keepalives_idle=5&keepalives_count=3"); ka == nil || ka.Count != 3 {
		t.Errorf("keepalives not read: %+v", ka)
	}
	if got := Digest("select  1\n from x"); got != Digest("select 1 from x") {
		t.Errorf("digest not whitespace-collapsed: %s", got)
	}
	text, values := Bind("a %(x)s b %(y)s c %(x)s", map[string]any{"x": 1, "y": 2})
	if text != "a $1 b $2 c $1" || len(values) != 2 || values[0] != 1 || values[1] != 2 {
		t.Errorf("Bind: %q %v", text, values)
	}
}
