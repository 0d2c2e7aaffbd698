package manifest

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ParseISODuration parses an ISO-8601 duration strictly: P[nY][nM][nD][T[nH][nM][n[.f]S]] or PnW
// alone, with at least one component and no bare P or PT. Years count 365 days and months 30, since
// a refresh cadence needs a fixed length. Only the seconds may carry a fraction.
func ParseISODuration(s string) (time.Duration, error) {
	bad := func(why string) (time.Duration, error) {
		return 0, fmt.Errorf("%q is not an ISO-8601 duration: %s", s, why)
	}
	if len(s) < 2 || s[0] != 'P' {
		return bad("it must start with P, e.g. PT24H or P1D")
	}
	const day = 24 * time.Hour
	dateUnits := map[byte]time.Duration{'Y': 365 * day, 'M': 30 * day, 'W': 7 * day, 'D': day}
	timeUnits := map[byte]time.Duration{'H': time.Hour, 'M': time.Minute, 'S': time.Second}
	order := "YMWD"
	var total float64
	inTime, components, last := false, 0, -1
	weeks := false
	for i := 1; i < len(s); {
		if s[i] == 'T' {
			if inTime {
				return bad("T appears twice")
			}
			inTime, last = true, -1
			order = "HMS"
			i++
			if i == len(s) {
				return bad("nothing follows T")
			}
			continue
		}
		j := i
		for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '.') {
			j++
		}
		if j == i || j == len(s) {
			return bad("each component is a number followed by a unit")
		}
		num, unit := s[i:j], s[j]
		units := dateUnits
		if inTime {
			units = timeUnits
		}
		d, ok := units[unit]
		idx := strings.IndexByte(order, unit)
		if !ok || idx < 0 {
			return bad(fmt.Sprintf("unknown unit %q here", unit))
		}
		if idx <= last {
			return bad("units are out of order or repeated")
		}
		last = idx
		n, err := strconv.ParseFloat(num, 64)
		if err != nil || (unit != 'S' || !inTime) && strings.IndexByte(num, '.') >= 0 {
			return bad("only seconds may have a fraction")
		}
		if unit == 'W' && !inTime {
			weeks = true
		}
		total += n * float64(d)
		components++
		i = j + 1
	}
	if components == 0 {
		return bad("it has no components")
	}
	if weeks && components > 1 {
		return bad("weeks (PnW) cannot be combined with other units")
	}
	if total > math.MaxInt64 {
		return bad("it is too long")
	}
	return time.Duration(total), nil
}
