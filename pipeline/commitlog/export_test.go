package commitlog

// OpenLookup lets the external tests open a log read back by id.
var OpenLookup = openLookup
