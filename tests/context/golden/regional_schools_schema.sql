CREATE TABLE district (
  district_id INTEGER, -- the unique id of the district
  name TEXT, -- the name of the district; examples: 'Hradec Králové', 'Pardubice'
  region TEXT, -- the region the district belongs to; values: stored with a lower-case direction word, e.g. "east Bohemia"; examples: 'east Bohemia', 'north Moravia'
  population INTEGER, -- number of inhabitants
  PRIMARY KEY (district_id)
);
CREATE TABLE school (
  school_id INTEGER, -- unique id of the school
  district_id INTEGER, -- the district of the school
  name TEXT, -- the name of the school; examples: 'Lipová Primary', 'Hradec Technical'
  kind TEXT, -- the kind of school; values: primary, secondary or vocational; examples: 'primary', 'vocational'
  opened TEXT, -- the date the school opened; values: YYYY-MM-DD; NULL when unknown; examples: '1998-09-01', '2005-09-01'
  is_charter INTEGER, -- whether the school is a charter school; values: 1: charter school 0: public school
  PRIMARY KEY (school_id),
  FOREIGN KEY (district_id) REFERENCES district(district_id)
);
CREATE TABLE score (
  school_id INTEGER, -- the school tested
  year INTEGER, -- year of the test
  test_takers INTEGER, -- students who took the test
  avg_math REAL, -- average math score (académie scale)
  avg_reading REAL, -- average reading score
  PRIMARY KEY (school_id, year),
  FOREIGN KEY (school_id) REFERENCES school(school_id)
);
-- Stored values resembling words of the question:
--   district.region matches question: 'east Bohemia', 'west Bohemia'
