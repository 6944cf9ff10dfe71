package pipefile

import "fmt"

// DescribeValue describes a decoded TOML value for messages.
func DescribeValue(raw any) string {
	switch x := raw.(type) {
	case string:
		return fmt.Sprintf("string %q", x)
	case int64:
		return fmt.Sprintf("integer %d", x)
	case float64:
		return fmt.Sprintf("number %v", x)
	case bool:
		return fmt.Sprintf("boolean %v", x)
	case []any, []map[string]any:
		return "array"
	case map[string]any:
		return "table"
	}
	return fmt.Sprintf("%T", raw)
}
