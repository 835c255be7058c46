package catalog

import (
	"unicode"

	"github.com/surgekit/surge/internal/apperr"
)

// Text a client writes (names, titles, addresses, rules) holds no control characters
// (Unicode Cc: C0, DEL, C1): a NUL or an escape sequence stored in a title reaches every
// page, log line and terminal that shows it. A voucher's rules may hold line breaks ("\n"),
// one rule a line.

// plainText refuses a control character in any of values (nil: not being set); field names
// the input.
func plainText(field string, values ...*string) error {
	for _, v := range values {
		if v != nil {
			if err := checkText(field, *v, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// plainTexts is plainText for a list of values.
func plainTexts(field string, values []string) error {
	for i := range values {
		if err := checkText(field, values[i], false); err != nil {
			return err
		}
	}
	return nil
}

// ruleText checks a voucher's rules: plain text and line breaks.
func ruleText(rules *string) error {
	if rules == nil {
		return nil
	}
	return checkText("rules", *rules, true)
}

func checkText(field, s string, lineBreaks bool) error {
	for i, r := range s {
		if !unicode.IsControl(r) || (lineBreaks && r == '\n') {
			continue
		}
		if lineBreaks {
			return apperr.Invalid(field, "%s must not contain control characters other than line breaks (\\n): %U at byte %d", field, r, i)
		}
		return apperr.Invalid(field, "%s must not contain control characters: %U at byte %d", field, r, i)
	}
	return nil
}

// checkPrice refuses a voucher that charges more than it is worth. field names the input
// that made it so.
func checkPrice(field string, pay, actual int64) error {
	if pay > actual {
		return apperr.Invalid(field, "payValue must be <= actualValue (cents): %d > %d", pay, actual)
	}
	return nil
}

// firstErr returns the first error of errs that is not nil.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
