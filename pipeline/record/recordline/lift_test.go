package recordline

import "testing"

func TestMaskEnd(t *testing.T) {
	for _, c := range []struct {
		in            string
		max           int
		end, all, in_ int
	}{
		{"0, 0,1,1 ,1]x", 3, 11, 3, 1},
		{"1,1,1]", 0, 5, 3, 3},
		{"]", 4, 0, 0, 0},
		{"1,\"a\"]", 4, -1, 0, 0},
	} {
		var m MaskCount
		end := maskEnd([]byte(c.in), c.max, &m)
		if end != c.end || end >= 0 && (m.All != c.all || m.In != c.in_ || !m.Known) {
			t.Errorf("%q max %d: end %d, %+v", c.in, c.max, end, m)
		}
	}
}
