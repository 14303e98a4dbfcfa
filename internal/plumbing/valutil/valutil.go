// Package valutil fills a Config's unset fields by the rule every
// component follows: a number left zero, or set negative (which no field
// accepts), takes the field's documented default. Strings and other
// comparable fields use cmp.Or, where only the zero value is unset.
package valutil

// Number is what PositiveOr takes: integers, floats and durations.
type Number interface {
	~int | ~int32 | ~int64 | ~float64
}

// PositiveOr returns v, or def when v is zero or negative.
func PositiveOr[T Number](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
