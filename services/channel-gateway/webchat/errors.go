package webchat

// userError is an error the page shows as is.
type userError string

func (e userError) Error() string { return string(e) }
