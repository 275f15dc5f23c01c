package web

// ArchivedWrites are the unsafe routes an archived project still answers: the access
// tests read the one list refuseArchived uses.
var ArchivedWrites = archivedWrites
