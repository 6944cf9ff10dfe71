package numfmt

import "testing"

func TestBytesAndCount(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 12_900_000: "12.3 MiB", 5 << 30: "5.0 GiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
	for v, want := range map[float64]string{0: "0", 99999: "99999", 123456: "123.5K", 913786: "913.8K", 1.5e6: "1.50M", 2.25e9: "2.25G", 0.5: "0.50", 12.34: "12.3", 123.4: "123", -250000: "-250.0K"} {
		if got := Count(v); got != want {
			t.Errorf("Count(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestPlural(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{Plural(1, "crash"), "1 crash"}, {Plural(2, "crash"), "2 crashes"}, {Plural(int64(0), "shard"), "0 shards"},
		{Plural(3, "batch"), "3 batches"}, {Plural(2, "start"), "2 starts"},
	} {
		if tc.got != tc.want {
			t.Errorf("%q, want %q", tc.got, tc.want)
		}
	}
}
