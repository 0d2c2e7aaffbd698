package cobramcp

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// probeLimit is the most arguments arity tries; a validator accepting that many is taken to
// accept any number.
const probeLimit = 10

// arity is what cmd.Args accepts, found as cobra-mcp-bridge.md's option C says: by calling it with
// 0 to probeLimit arguments (each the first of ValidArgs, else "x"). max is -1 for no bound; ok
// is false when there is no validator, or it accepted none of the calls (it depends on more than
// the count). A validator that panics refuses.
func arity(cmd *cobra.Command) (min, max int, ok bool) {
	if cmd.Args == nil {
		return 0, 0, false
	}
	sample := "x"
	if len(cmd.ValidArgs) > 0 {
		sample, _, _ = strings.Cut(cmd.ValidArgs[0], "\t")
	}
	min, max = -1, -1
	for n := 0; n <= probeLimit; n++ {
		if accepts(cmd, slices.Repeat([]string{sample}, n)) {
			if min < 0 {
				min = n
			}
			max = n
		}
	}
	if min < 0 {
		return 0, 0, false
	}
	if max == probeLimit {
		max = -1
	}
	return min, max, true
}

func accepts(cmd *cobra.Command, args []string) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return cmd.Args(cmd, args) == nil
}

// withArity reconciles the positionals of a Use string with what the validator accepts: the first
// min are required; past max they are dropped (NoArgs drops all); missing ones are added as
// arg1, arg2… (required up to min, optional up to max) and, with no bound and no variadic one,
// an optional variadic "args".
func withArity(specs []ArgSpec, min, max int) []ArgSpec {
	variadic := slices.ContainsFunc(specs, func(a ArgSpec) bool { return a.Variadic })
	if max >= 0 && !variadic && len(specs) > max {
		specs = specs[:max]
	}
	if !variadic {
		for len(specs) < min || (max >= 0 && len(specs) < max) {
			n := len(specs) + 1
			specs = append(specs, ArgSpec{Name: fmt.Sprintf("arg%d", n), Type: "string",
				Description: fmt.Sprintf("positional argument %d (the command's Args accepts %s)", n, arityText(min, max))})
		}
		if max < 0 {
			specs = append(specs, ArgSpec{Name: "args", Type: "string", Variadic: true,
				Description: fmt.Sprintf("further positional arguments (the command's Args accepts %s)", arityText(min, max))})
		}
	}
	for i := range specs {
		if i < min {
			specs[i].Required = true
		}
	}
	return specs
}

func arityText(min, max int) string {
	switch {
	case max < 0:
		return fmt.Sprintf("%d or more", min)
	case min == max:
		return fmt.Sprint(min)
	}
	return fmt.Sprintf("%d to %d", min, max)
}
