package gateway

import (
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// validUTF8 replaces every invalid UTF-8 sequence in m's strings, nested
// ones and map keys included, with U+FFFD. Protobuf's string fields must
// be UTF-8, and encoding refuses a message whose are not; but platforms
// hand over bytes (WhatsApp's messages are proto2, which does not check),
// and a message refused at encoding would be neither stored nor
// dead-lettered, only sent again by its platform, for good.
func validUTF8(m protoreflect.Message) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			fixMap(fd, v.Map())
		case fd.IsList():
			l := v.List()
			for i := range l.Len() {
				switch fd.Kind() {
				case protoreflect.StringKind:
					if s := l.Get(i).String(); !utf8.ValidString(s) {
						l.Set(i, protoreflect.ValueOfString(strings.ToValidUTF8(s, "\uFFFD")))
					}
				case protoreflect.MessageKind, protoreflect.GroupKind:
					validUTF8(l.Get(i).Message())
				}
			}
		case fd.Kind() == protoreflect.StringKind:
			if s := v.String(); !utf8.ValidString(s) {
				m.Set(fd, protoreflect.ValueOfString(strings.ToValidUTF8(s, "\uFFFD")))
			}
		case fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind:
			validUTF8(v.Message())
		}
		return true
	})
}

// fixMap is validUTF8 for one map field.
func fixMap(fd protoreflect.FieldDescriptor, mp protoreflect.Map) {
	type entry struct {
		k protoreflect.MapKey
		v protoreflect.Value
	}
	var rekey []entry
	mp.Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
		switch fd.MapValue().Kind() {
		case protoreflect.StringKind:
			if s := v.String(); !utf8.ValidString(s) {
				v = protoreflect.ValueOfString(strings.ToValidUTF8(s, "\uFFFD"))
				mp.Set(k, v)
			}
		case protoreflect.MessageKind:
			validUTF8(v.Message())
		}
		if fd.MapKey().Kind() == protoreflect.StringKind && !utf8.ValidString(k.String()) {
			rekey = append(rekey, entry{k, v})
		}
		return true
	})
	for _, e := range rekey {
		mp.Clear(e.k)
		mp.Set(protoreflect.ValueOfString(strings.ToValidUTF8(e.k.String(), "\uFFFD")).MapKey(), e.v)
	}
}
