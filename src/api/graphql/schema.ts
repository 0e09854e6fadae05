/**
 * WideSky's GraphQL schema, the part Hayloft serves (names, arguments and shapes as WideSky's
 * schema reference gives them, so WideSky's client and Grafana queries run unchanged): the
 * `haystack` root with `search` and `entity`, entity sets with `count`, `entity`, `search`,
 * `ref`, `tagSummary`, `units` and `history`; entities with their tags as strings and as typed
 * `kindValue`s; history with `timeSeries`, `aggregate` and `select` grouped by time with `fill`.
 * Fields of WideSky's schema that are not here (delta, movingAverage, applyConstant, filters,
 * rankings) are refused by validation as unknown fields, which names them.
 */
import { buildSchema, type GraphQLSchema } from 'graphql';

export const SDL = /* GraphQL */ `
"""Query data from Hayloft, as WideSky's GraphQL API"""
type Query {
  """Query the semantic/historical data"""
  haystack: Haystack
}

"""A Project Haystack filter e.g. equip and siteRef->geoCity == "Chicago", see https://project-haystack.org/doc/Filters"""
scalar HaystackFilter
"""Number of milliseconds elapsed since 1970-01-01T00:00:00.000Z."""
scalar UnixTime
"""A dateTime represented in ISO-8601 format e.g. 2019-04-29T03:23:38+00:00"""
scalar iso8601

type Haystack {
  """Search for entities"""
  search(filter: HaystackFilter!, limit: Int): Entities
  """Lookup an entity from its uuid or fully qualified name (site.equip.point)"""
  entity(id: String!): Entity
}

"""A collection of entities"""
type Entities {
  """Retrieve the timeseries data from a list of entities."""
  history(entityLimit: Int, rangeAbsolute: absoluteRange, rangeRelative: relativeRange): History
  """Return the number of entities in this set"""
  count: Int!
  """Perform more operations on the individual entity"""
  entity: [Entity]
  """For each entity, search for more entities with a filter that also have a tag value {whereTag} that matches a tag value of the current entity {matchesTag}"""
  search(filter: HaystackFilter!, whereTag: String!, matchesTag: String, limit: Int): Entities
  """A statistical view of the tags available in the system"""
  tagSummary(tagFilter: [String]): [TagSummary!]!
  """For each entity in this set, return the related entities linked by the nominated traversal path."""
  ref(path: String!): Entities
  """Value of the 'unit' Tag if all entities match. Otherwise returns 'mixed'"""
  units: String
}

"""An abstraction for some physical object in the real world."""
type Entity {
  """Description of the entity"""
  description: String!
  """Identifier of the entity"""
  id: ID!
  """Name of the entity"""
  name(fullyQualified: Boolean): String!
  """Search for entities with a filter that also have a Tag Value {whereTag} that matches a tag value of the current entity {matchesTag}"""
  search(filter: HaystackFilter!, whereTag: String!, matchesTag: String, limit: Int): Entities
  """Lookup the tags of this entity"""
  tags(tagFilter: [String]): [Tag!]!
  """Return the neighbour entity of the nominated ref tag e.g. equipRef"""
  refEntity(refTag: String!): Entity
  """Return the related entities linked by the nominated traversal path."""
  ref(path: String!): Entities
  """Retrieve the timeseries data from the entity."""
  history(rangeAbsolute: absoluteRange, rangeRelative: relativeRange): History
  """Return the unit of measurement for this entity"""
  units: String
}

type Tag {
  """Name of the tag"""
  name: String!
  """The value of the tag converted to String."""
  value: String
  """The unconverted value of the tag"""
  kindValue: tagKind
}

"""A summary view of a particular tag across multiple entities"""
type TagSummary {
  count: Int
  name: String!
  values(distinct: Boolean): [String]
  kind: String
  kindValues(distinct: Boolean, aggregation: tagValueAggregation): [tagKind!]
}

union tagKind = Bool | Coord | Date | DateTime | List | Marker | Number | Ref | Str | Time | Uri
union pointKind = Bool | Number | Str

type Bool { bool: Boolean }
type Coord { coord: String, geohash: String, longitude: Float, latitude: Float }
type Date { date: String }
type DateTime { dateTime: String, isoDateTime: iso8601, unixTime: UnixTime, timeZone: String }
type List { listJSON: String!, list: [tagKind]! }
type Marker { isMarker: Boolean! }
type Number { value: Float, unit: String }
type Ref { ref: String }
type Str { str: String }
type Time { time: String }
type Uri { uri: String }

type History {
  """Take values and aggregate them in some way"""
  aggregate(function: aggregations!, allEntities: Boolean, groupBy: groupBy): History
  """Return one or more records based on function logic"""
  select(function: Selectors!, n: Int, allEntities: Boolean, groupBy: groupBy): History
  """The history time-series"""
  timeSeries: [TimeSeries]
}

type TimeSeries {
  """The history data points"""
  dataPoints: [dataPoint]
}

type dataPoint {
  """Time of the datapoint."""
  time: UnixTime
  """Value of the datapoint converted to string."""
  value: String
  """Value of the datapoint converted to its actual data type."""
  valueKind: pointKind
}

input absoluteRange {
  """Start time of the range (inclusive)."""
  start: iso8601
  """End time of the range (exclusive)."""
  end: iso8601
}

input relativeRange {
  """Number of time units before now()"""
  size: Int!
  timeUnit: duration!
  """Offset the range"""
  offset: timeOffset
}

input timeOffset {
  direction: relativePosition!
  offsetUnits: duration!
  offsetSize: Int!
}

"""Group history by a specified time interval"""
input groupBy {
  groupByUnits: duration!
  groupBySize: Int!
  """Changes the value reported for time intervals that have no data (default NULLVALUE)"""
  fill: fillOption
  """Shifts the groupBy time boundaries (UTC) by the nominated time duration."""
  offset: timeOffset
}

enum duration { MILLISECOND SECOND MINUTE HOUR DAY WEEK }
enum fillOption { LINEAR NONE NULLVALUE PREVIOUS }
enum relativePosition { FORWARD BACK }
enum tagValueAggregation { SUM MAX MIN MEAN }
"""Aggregate functions (DISTINCT, MEDIAN and MODE need every sample of a bucket: refused by Hayloft)"""
enum aggregations { COUNT DISTINCT MEAN MEDIAN MODE SPREAD STDDEV SUM }
"""Selector functions (TOP, BOTTOM and PERCENTILE need every sample of a bucket: refused by Hayloft)"""
enum Selectors { FIRST LAST MAX MIN TOP BOTTOM PERCENTILE }
`;

export function haystackSchema(): GraphQLSchema {
  return buildSchema(SDL);
}
