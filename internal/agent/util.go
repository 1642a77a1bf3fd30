package agent

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

func itoa(n int) string { return strconv.Itoa(n) }

// progressText renders a progress event's values: "percent=42 step=build".
func progressText(values map[string]any) string {
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%v", k, values[k])
	}
	return strings.Join(parts, " ")
}

// fmtValue renders a decoded MsgPack value as JSON where it can.
func fmtValue(v any) string {
	if b, err := json.Marshal(v); err == nil {
		return string(b)
	}
	return fmt.Sprint(v)
}
