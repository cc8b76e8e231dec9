package protocol

import (
	"fmt"
	"slices"
	"strings"
)

// TagExpr is a parsed subscription tag expression: "*" (every message) or
// "a || b || c" (messages whose TAGS property is one of the tags).
type TagExpr struct {
	All   bool     // "*" or empty: everything matches
	Tags  []string // sorted, without duplicates; nil when All
	Codes []int64  // TagsHashCode of each of Tags, same order
}

// MaxTagExprLength bounds the length of a tag expression.
const MaxTagExprLength = 4096

// ParseTagExpr parses a tag expression. The empty string and "*" match all.
// Tags are separated by "||" with optional spaces around them; a tag may not
// be empty and may not contain spaces, '|' or '*'.
func ParseTagExpr(expr string) (TagExpr, error) {
	if len(expr) > MaxTagExprLength {
		return TagExpr{}, fmt.Errorf("protocol: tag expression is %d bytes, limit %d", len(expr), MaxTagExprLength)
	}
	s := strings.TrimSpace(expr)
	if s == "" || s == "*" {
		return TagExpr{All: true}, nil
	}
	var tags []string
	for i, part := range strings.Split(s, "||") {
		t := strings.TrimSpace(part)
		switch {
		case t == "":
			return TagExpr{}, fmt.Errorf("protocol: tag expression %q: tag %d is empty", expr, i+1)
		case t == "*":
			return TagExpr{}, fmt.Errorf("protocol: tag expression %q: \"*\" must stand alone", expr)
		case strings.ContainsAny(t, "|* \t\r\n"):
			return TagExpr{}, fmt.Errorf("protocol: tag expression %q: tag %q contains a space, '|' or '*'", expr, t)
		}
		tags = append(tags, t)
	}
	slices.Sort(tags)
	tags = slices.Compact(tags)
	codes := make([]int64, len(tags))
	for i, t := range tags {
		codes[i] = TagsHashCode(t)
	}
	return TagExpr{Tags: tags, Codes: codes}, nil
}

// Matches reports whether a message whose TAGS property is tags matches.
func (e TagExpr) Matches(tags string) bool {
	if e.All {
		return true
	}
	_, found := slices.BinarySearch(e.Tags, tags)
	return found
}

// MatchesCode reports whether a ConsumeQueue entry with this tags hash code
// may match. Hash codes collide, so a consumer re-checks with Matches.
func (e TagExpr) MatchesCode(code int64) bool {
	return e.All || slices.Contains(e.Codes, code)
}

// String returns the canonical form of the expression.
func (e TagExpr) String() string {
	if e.All {
		return "*"
	}
	return strings.Join(e.Tags, " || ")
}
