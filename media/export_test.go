package media

// DerivedKey exposes derivedKey to the package's tests.
var DerivedKey = derivedKey
