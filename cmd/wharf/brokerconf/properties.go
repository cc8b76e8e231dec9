package brokerconf

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// property is one key=value of a properties file.
type property struct {
	key, value string
	line       int // line on which the entry starts
}

// readProperties reads r in Java's .properties format, as RocketMQ reads
// broker.conf (java.util.Properties.load), with two differences: the input is
// UTF-8 (Java reads ISO-8859-1; ASCII files are the same in both) and
// unescaped trailing whitespace of a value is dropped (Java keeps it, and
// RocketMQ then fails to parse "10911 " as a number).
//
// The format: one entry per logical line; lines whose first non-blank
// character is # or ! are comments; blank lines are skipped; leading
// whitespace is ignored; the key ends at the first unescaped '=', ':' or
// whitespace, and whitespace around that separator is skipped, so
// "key=value", "key: value" and "key value" are the same; a line ending in
// an odd number of backslashes continues on the next line, whose leading
// whitespace is skipped; escapes are \t \n \r \f \uXXXX, and a backslash
// before any other character stands for that character (\\ \= \: \# \ ).
func readProperties(r io.Reader) ([]property, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	text := strings.TrimPrefix(string(data), "\uFEFF")
	lines := splitLines(text)
	var props []property
	for i := 0; i < len(lines); i++ {
		start := i + 1
		logical := trimLeadingSpace(lines[i])
		if logical == "" || logical[0] == '#' || logical[0] == '!' {
			continue
		}
		for continues(logical) {
			logical = logical[:len(logical)-1]
			if i+1 == len(lines) {
				break // a continuation at the end of the input continues into nothing
			}
			i++
			logical += trimLeadingSpace(lines[i])
		}
		key, value, err := splitEntry(logical)
		if err != nil {
			return props, fmt.Errorf("line %d: %w", start, err)
		}
		props = append(props, property{key: key, value: value, line: start})
	}
	return props, nil
}

// splitLines splits s at \n, \r\n and \r.
func splitLines(s string) []string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\f' }

func trimLeadingSpace(s string) string {
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return s[i:]
}

// continues reports whether a line ends in an odd number of backslashes.
func continues(s string) bool {
	n := 0
	for i := len(s) - 1; i >= 0 && s[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// splitEntry splits a logical line into its unescaped key and value.
func splitEntry(line string) (key, value string, err error) {
	keyEnd, valueStart := len(line), len(line)
	hasSep, escaped := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		if !escaped && (c == '=' || c == ':' || isSpace(c)) {
			keyEnd, valueStart, hasSep = i, i+1, c == '=' || c == ':'
			break
		}
		escaped = c == '\\' && !escaped
	}
	for valueStart < len(line) {
		c := line[valueStart]
		if !isSpace(c) {
			if hasSep || (c != '=' && c != ':') {
				break
			}
			hasSep = true
		}
		valueStart++
	}
	if key, err = unescape(line[:keyEnd], false); err != nil {
		return "", "", err
	}
	if value, err = unescape(line[valueStart:], true); err != nil {
		return "", "", err
	}
	return key, value, nil
}

// unescape decodes the escapes of s. With trimTrailing it also drops
// trailing whitespace that was not escaped.
func unescape(s string, trimTrailing bool) (string, error) {
	if !strings.Contains(s, `\`) {
		if trimTrailing {
			s = strings.TrimRight(s, " \t\f")
		}
		return s, nil
	}
	var b strings.Builder
	keep := 0 // length of b up to its last escaped character
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i == len(s) {
			break // a lone trailing backslash stands for nothing
		}
		switch c = s[i]; c {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			r, n, err := decodeU(s[i-1:])
			if err != nil {
				return "", err
			}
			b.WriteRune(r)
			i += n - 2
		default:
			// Any other escaped character stands for itself; copy all of
			// its bytes so a multi-byte UTF-8 character stays whole.
			_, size := utf8.DecodeRuneInString(s[i:])
			b.WriteString(s[i : i+size])
			i += size - 1
		}
		keep = b.Len()
	}
	out := b.String()
	if trimTrailing {
		out = out[:keep] + strings.TrimRight(out[keep:], " \t\f")
	}
	return out, nil
}

// decodeU decodes the \uXXXX escape at the start of s (and the low half of
// a surrogate pair right after it), returning the rune and the bytes used.
func decodeU(s string) (rune, int, error) {
	hex := func(s string) (rune, bool) {
		if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(s[2:6], 16, 16)
		return rune(v), err == nil
	}
	r, ok := hex(s)
	if !ok {
		return 0, 0, fmt.Errorf("malformed \\uXXXX escape %q", s[:min(len(s), 6)])
	}
	if utf16.IsSurrogate(r) {
		if lo, ok := hex(s[6:]); ok {
			if pair := utf16.DecodeRune(r, lo); pair != utf8.RuneError {
				return pair, 12, nil
			}
		}
	}
	return r, 6, nil
}

// escapeValue escapes a value for a properties file so readProperties gives
// it back unchanged.
func escapeValue(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		case r == ' ' && (i == 0 || strings.TrimRight(s[i:], " ") == ""):
			b.WriteString(`\ `) // leading and trailing spaces would be dropped
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
