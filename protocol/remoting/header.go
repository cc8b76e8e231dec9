package remoting

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
)

// jsonHeader is the JSON header as both clients write it. Language is a
// name ("JAVA", "GO") from fastjson and jsoniter, a number from some
// others: both are accepted.
type jsonHeader struct {
	Code                    int32             `json:"code"`
	ExtFields               map[string]string `json:"extFields,omitempty"`
	Flag                    int32             `json:"flag"`
	Language                json.RawMessage   `json:"language"`
	Opaque                  int32             `json:"opaque"`
	Remark                  *string           `json:"remark,omitempty"`
	SerializeTypeCurrentRPC string            `json:"serializeTypeCurrentRPC,omitempty"`
	Version                 int32             `json:"version"`
}

func decodeJSONHeader(b []byte) (*Command, error) {
	var h jsonHeader
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(&h); err != nil {
		return nil, fmt.Errorf("%w: JSON header: %v", ErrFrame, err)
	}
	if d.More() {
		return nil, fmt.Errorf("%w: JSON header: bytes after the object", ErrFrame)
	}
	c := &Command{Code: h.Code, Version: h.Version, Opaque: h.Opaque, Flag: h.Flag}
	if len(h.ExtFields) > 0 { // none is nil, as from the binary header
		c.ExtFields = h.ExtFields
	}
	if h.Remark != nil {
		c.Remark = *h.Remark
	}
	lang, err := parseLanguage(h.Language)
	if err != nil {
		return nil, err
	}
	c.Language = lang
	return c, nil
}

func parseLanguage(raw json.RawMessage) (byte, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return LangJava, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, fmt.Errorf("%w: JSON header: language: %v", ErrFrame, err)
		}
		return languageCode(s), nil
	}
	n, err := strconv.ParseUint(string(raw), 10, 8)
	if err != nil {
		return 0, fmt.Errorf("%w: JSON header: language %s is neither a name nor a code", ErrFrame, raw)
	}
	return byte(n), nil
}

func appendJSONHeader(dst []byte, c *Command) ([]byte, error) {
	h := jsonHeader{Code: c.Code, ExtFields: c.ExtFields, Flag: c.Flag, Opaque: c.Opaque, Version: c.Version,
		SerializeTypeCurrentRPC: "JSON"}
	h.Language = json.RawMessage(strconv.Quote(LanguageName(c.Language)))
	if c.Remark != "" {
		h.Remark = &c.Remark
	}
	b, err := json.Marshal(&h)
	if err != nil {
		return dst, fmt.Errorf("remoting: encode JSON header: %w", err)
	}
	return append(dst, b...), nil
}

// binaryFixed is the binary header's size without remark and ext fields.
const binaryFixed = 2 + 1 + 2 + 4 + 4 + 4 + 4

func decodeBinaryHeader(b []byte) (*Command, error) {
	if len(b) < binaryFixed {
		return nil, fmt.Errorf("%w: binary header of %d bytes, at least %d needed", ErrFrame, len(b), binaryFixed)
	}
	c := &Command{
		Code:     int32(int16(binary.BigEndian.Uint16(b))),
		Language: b[2],
		Version:  int32(int16(binary.BigEndian.Uint16(b[3:]))),
		Opaque:   int32(binary.BigEndian.Uint32(b[5:])),
		Flag:     int32(binary.BigEndian.Uint32(b[9:])),
	}
	p := 13
	remark, p, err := lenBytes(b, p, 4, "remark")
	if err != nil {
		return nil, err
	}
	c.Remark = string(remark)
	ext, p, err := lenBytes(b, p, 4, "ext fields")
	if err != nil {
		return nil, err
	}
	if p != len(b) {
		return nil, fmt.Errorf("%w: binary header: %d bytes after the ext fields", ErrFrame, len(b)-p)
	}
	if c.ExtFields, err = decodeExtFields(ext); err != nil {
		return nil, err
	}
	return c, nil
}

// lenBytes reads a length of width 2 or 4 at p and that many bytes after.
func lenBytes(b []byte, p, width int, what string) ([]byte, int, error) {
	if len(b)-p < width {
		return nil, p, fmt.Errorf("%w: binary header: %s length cut off", ErrFrame, what)
	}
	var n int64
	if width == 2 {
		n = int64(int16(binary.BigEndian.Uint16(b[p:])))
	} else {
		n = int64(int32(binary.BigEndian.Uint32(b[p:])))
	}
	p += width
	if n < 0 || n > int64(len(b)-p) {
		return nil, p, fmt.Errorf("%w: binary header: %s length %d, %d bytes left", ErrFrame, what, n, len(b)-p)
	}
	return b[p : p+int(n)], p + int(n), nil
}

func decodeExtFields(b []byte) (map[string]string, error) {
	if len(b) == 0 {
		return nil, nil
	}
	m := make(map[string]string)
	for p := 0; p < len(b); {
		k, np, err := lenBytes(b, p, 2, "ext key")
		if err != nil {
			return nil, err
		}
		v, np, err := lenBytes(b, np, 4, "ext value")
		if err != nil {
			return nil, err
		}
		m[string(k)] = string(v)
		p = np
	}
	return m, nil
}

func appendBinaryHeader(dst []byte, c *Command) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(int16(c.Code)))
	dst = append(dst, c.Language)
	dst = binary.BigEndian.AppendUint16(dst, uint16(int16(c.Version)))
	dst = binary.BigEndian.AppendUint32(dst, uint32(c.Opaque))
	dst = binary.BigEndian.AppendUint32(dst, uint32(c.Flag))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(c.Remark)))
	dst = append(dst, c.Remark...)
	at := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	for _, k := range sortedKeys(c.ExtFields) {
		v := c.ExtFields[k]
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(k)))
		dst = append(dst, k...)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(v)))
		dst = append(dst, v...)
	}
	binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	return dst
}
