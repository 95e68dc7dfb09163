package sparksim

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The spark.properties file is a java.util.Properties file written by Properties.store(Writer):
// a comment naming the ConfigMap, a date comment, then key=value lines with Java's escaping.
// The driver reads it back with Properties.load, so both sides are implemented here.

// storeProperties renders props as Properties.store(writer, comment) does (keys sorted, as
// Java 18+ writes them; earlier JVMs write hash order, which no reader depends on).
func storeProperties(props map[string]string, comment string, now time.Time) string {
	var b strings.Builder
	for _, line := range strings.Split(comment, "\n") {
		b.WriteString("#" + line + "\n")
	}
	// java.util.Date.toString: "EEE MMM dd HH:mm:ss zzz yyyy".
	b.WriteString("#" + now.Format("Mon Jan 02 15:04:05 MST 2006") + "\n")
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.WriteString(escapeProperty(k, true) + "=" + escapeProperty(props[k], false) + "\n")
	}
	return b.String()
}

// escapeProperty is Properties.saveConvert without unicode escaping (the Writer variant).
func escapeProperty(s string, isKey bool) string {
	var b strings.Builder
	for i, r := range s {
		switch r {
		case '\\':
			b.WriteString(`\\`)
		case ' ':
			if i == 0 || isKey {
				b.WriteString(`\ `)
			} else {
				b.WriteByte(' ')
			}
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\f':
			b.WriteString(`\f`)
		case '=', ':', '#', '!':
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// loadProperties parses a Properties file as Properties.load(Reader) does: comment lines (# or !),
// backslash line continuations, keys ended by an unescaped '=', ':' or whitespace, and the
// \t \n \r \f \uXXXX escapes.
func loadProperties(text string) (map[string]string, error) {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	text = strings.ReplaceAll(text, "\r", "\n")
	lines := strings.Split(text, "\n")
	props := map[string]string{}
	for i := 0; i < len(lines); i++ {
		line := strings.TrimLeft(lines[i], " \t\f")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		// A line ending in an odd number of backslashes continues on the next one.
		for trailingBackslashes(line)%2 == 1 && i+1 < len(lines) {
			i++
			line = line[:len(line)-1] + strings.TrimLeft(lines[i], " \t\f")
		}
		if trailingBackslashes(line)%2 == 1 {
			line = line[:len(line)-1]
		}
		key, rest := splitPropertyKey(line)
		k, err := unescapeProperty(key)
		if err != nil {
			return nil, err
		}
		v, err := unescapeProperty(rest)
		if err != nil {
			return nil, err
		}
		props[k] = v
	}
	return props, nil
}

func trailingBackslashes(s string) int {
	n := 0
	for n < len(s) && s[len(s)-1-n] == '\\' {
		n++
	}
	return n
}

// splitPropertyKey returns the raw key and the raw value of one logical line.
func splitPropertyKey(line string) (key, value string) {
	end := len(line)
	for i := 0; i < len(line); i++ {
		c := line[i]
		if c == '\\' {
			i++
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			end = i
			break
		}
	}
	key, rest := line[:end], line[end:]
	rest = strings.TrimLeft(rest, " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	return key, rest
}

func unescapeProperty(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf("sparksim: malformed \\u escape in %q", s)
			}
			n, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf("sparksim: malformed \\u escape in %q", s)
			}
			b.WriteRune(rune(n))
			i += 4
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}
